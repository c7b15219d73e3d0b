"""Which rows or windows to read: episode boundaries and window draws (they hold no rows)."""
