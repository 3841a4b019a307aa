"""Per-tenant limits of the gateway, counted in Redis so every gateway process shares them."""
