"""The sandbox entrypoint package. The Rust host ships every *.py in this directory (except
boot.py) inside the boot frame; boot.py installs them in memory as the `_mcp_bridge` package and
runs `_mcp_bridge.__main__.main`. See ARCHITECTURE.md, "The sandbox frame protocol"."""
