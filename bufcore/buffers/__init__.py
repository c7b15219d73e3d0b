"""The public buffer classes, composed from storage and sampling, saved through persist."""
