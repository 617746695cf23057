"""Small pieces shared across memjudge's subpackages (the only place for shared helpers)."""
