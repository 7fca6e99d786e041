"""Launch scripts in: read a user's script and write the spec it says."""
