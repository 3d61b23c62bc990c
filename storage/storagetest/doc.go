// Package storagetest holds the acceptance test that every storage.Bucket
// implementation passes.
package storagetest
