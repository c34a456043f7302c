"""The vendored test files and the plugin are run by runner.py in pytest processes of their
own, against a server; they are never collected by this suite's run."""

collect_ignore = ["vendor", "shims"]
