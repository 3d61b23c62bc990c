// Package layering holds the test that the top-level packages import each
// other only as ARCHITECTURE.md's table allows (testdata/imports.json):
// imports point down the table, and no package under api imports
// processor. Any of them may import internal/apptest (the test stack of
// storage parts); its own imports are checked with the importer's.
package layering
