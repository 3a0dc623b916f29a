// The GraphQL names of each kind of webhook (cron, change): `kind` picks the API.
export const API = {
  cron: { one: "cronWebhook", create: "createCronWebhook", update: "updateCronWebhook",
          remove: "deleteCronWebhook", input: "CronWebhookInput", result: "cronWebhook",
          deliveries: "cronWebhookDeliveries(cronWebhookId: $id, limit: 50)", listed: "cronWebhookDeliveries" },
  change: { one: "changeWebhook", create: "createChangeWebhook", update: "updateChangeWebhook",
            remove: "deleteChangeWebhook", input: "ChangeWebhookInput", result: "changeWebhook",
            deliveries: "changeWebhookDeliveries(changeWebhookId: $id, limit: 50)", listed: "changeWebhookDeliveries" },
};
