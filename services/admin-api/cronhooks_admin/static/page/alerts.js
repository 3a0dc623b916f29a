// OPEN ALERTS — reserved place (CONTRACT §10/§12). The #alerts-section of index.html
// stays hidden until GraphQL answers `alerts(open: true)`; then loadAlerts() fills it and
// shows it. It queries nothing yet: the field is being added to the schema separately.
export async function loadAlerts() {
  // Intentionally empty until `alerts(open: Boolean)` exists.
}
