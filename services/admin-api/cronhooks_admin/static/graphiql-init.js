// Starts GraphiQL (graphiql/, loaded before this by graphiql.html) on admin-api's
// POST /graphql. Every operation needs an admin token: it goes in the Headers tab, filled
// in from the admin page's sign-in (localStorage of this origin, so also in a new tab).
// Headers are not persisted by GraphiQL itself.
"use strict";
(function () {
  const token = localStorage.getItem("cronhooks-token") || "";
  const headers = JSON.stringify({ Authorization: "Bearer " + (token || "<admin token>") }, null, 2);
  const app = React.createElement(GraphiQL, {
    fetcher: GraphiQL.createFetcher({ url: "/graphql" }),
    defaultHeaders: headers,
    shouldPersistHeaders: false,
    isHeadersEditorEnabled: true,
    defaultEditorToolsVisibility: token ? false : "headers",
    defaultQuery: "{\n  cronWebhooks {\n    id\n    url\n    cronSchedule\n    nextRuns(count: 3)\n  }\n}\n",
  });
  ReactDOM.createRoot(document.getElementById("graphiql")).render(app);
})();
