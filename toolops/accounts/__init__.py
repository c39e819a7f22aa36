"""People's accounts: login lockout, idle sessions, two-factor, and agents' tokens.

Console accounts approve charges, so a guessed password is a real loss: guessing is
throttled per username and address (axes), a forgotten session ends by itself, and a
second factor can be asked for. Agents' tokens can be replaced or withdrawn at once.
See docs/accounts.md."""
