"""How far a null is drawn: sequential stopping rules with a stated error."""
