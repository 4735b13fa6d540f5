"""A transpose that reads a column per program (uncoalesced loads), and its tiled twin."""
