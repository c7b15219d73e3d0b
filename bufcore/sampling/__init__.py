"""Which rows or windows to read: episode boundaries, window draws, segment trees and prioritized
replay (they hold no rows)."""
