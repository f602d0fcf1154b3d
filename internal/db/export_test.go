package db

// Baseline and ReadTables let the tests compare the adopted schema with
// the baseline migration's.
var (
	Baseline   = baseline
	ReadTables = readTables
)
