// Package storagetest holds the acceptance test that every storage.Bucket
// implementation passes (Acceptance), and StartMinIO, which gives tests of
// any package a bucket on a real MinIO server (or on the S3 server named by
// MF_TEST_S3). Its fault injectors stand in front of such a real server:
// ConditionalHeaderDropper (a store that ignores conditional writes) and
// FaultyStoreProxy (a store that is full, or down, on demand).
package storagetest
