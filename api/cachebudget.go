package api

import "syscall"

// DefaultCacheBudget is the reporting API's default memory for decoded
// tables (mf's --api-cache-bytes, split between the rollups reader's
// column cache and ReportingConfig.CacheBytes): an eighth of the
// machine's memory, at least 128 MiB and at most 4 GiB
// (docs/reporting-data.md).
func DefaultCacheBudget() int64 {
	total := int64(4 << 30)
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err == nil && si.Totalram > 0 {
		total = int64(si.Totalram) * int64(si.Unit)
	}
	return min(max(total/8, 128<<20), 4<<30)
}
