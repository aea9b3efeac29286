"""What is measured of a head: one program for the heads and for their null."""
