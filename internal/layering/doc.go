// Package layering holds the test that the top-level packages import each
// other only as ARCHITECTURE.md's table allows (testdata/imports.json):
// imports point down the table, and no package under api imports
// processor.
package layering
