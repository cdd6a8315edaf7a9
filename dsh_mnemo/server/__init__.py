"""The resident hook server (`mnemo serve`) and its minimal client.

`client` is standard library only and imports nothing from mnemo: the hook
wrapper runs it as a script with `python3 -I -S`.  `daemon` is the server,
`state` what `status`, `doctor` and `serve --stop` read about it.
"""
