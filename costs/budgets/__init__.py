"""Budgets: where a project's month stands (`status`), the threshold alerts (`alerts`), the hard stop the scheduler
sees (`hard_stop`), and the project page's panel and form (`panels`, `views`)."""
