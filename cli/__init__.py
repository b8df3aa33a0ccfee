"""The click front end of twill (installed as `twill_cli`)."""
