"""The `tidal` command-line client. It talks to the REST API only, with a personal token."""
