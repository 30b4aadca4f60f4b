"""Authentication and authorization, protocol-neutral (accounts, signatures, permissions)."""
