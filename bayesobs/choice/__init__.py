"""Right/wrong tables (paradigm ``choice``): a table's rows with a right answer and a difficulty level."""
