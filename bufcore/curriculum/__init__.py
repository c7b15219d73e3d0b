"""The EMD curriculum: tracking error (EMD) -> expert-motion priorities, round by round."""
