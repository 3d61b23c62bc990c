// Package storagetest holds the acceptance test that every storage.Bucket
// implementation passes (Acceptance), and StartMinIO, which gives tests of
// any package a bucket on a real MinIO server (or on the S3 server named by
// MF_TEST_S3).
package storagetest
