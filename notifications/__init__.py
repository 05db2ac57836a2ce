"""Notifications, one place for every alert Tidal sends: tracking's metric alerts and costs' budget alerts today,
failure and pool alerts later. Callers build their own body and message; this app delivers them.

The public API:
- `notifications.send.to_webhooks(project_id, body, event)`: each of the project's enabled webhooks gets `body`,
  signed and POSTed only to a public address (`notifications.webhooks`), retried with backoff
  (`notifications.tasks.deliver_webhook_task`);
- `notifications.send.to_members(project_id, roles, subject, message)`: an e-mail to the project's members of those
  roles, and `notifications.send.mail_configured()`: whether a mail server is set (without one, no mail is sent);
- `notifications.sources.webhook_source`: the hook the app that keeps the webhooks (tracking, whose `Webhook` model
  they are) connects to in its `AppConfig.ready()`, so this app sits low, under every app that alerts.
"""
