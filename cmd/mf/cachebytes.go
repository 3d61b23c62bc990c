package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mfhq/mf/api"
)

// parseByteSize reads a size such as 536870912, 512MiB, 1GiB, 300MB or
// 2G (K, M, G: powers of 1000 with B, of 1024 with iB or alone).
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a size such as 512MiB or 2GiB, not %q", s)
	}
	return n * mult, nil
}

// apiCacheBytes is --api-cache-bytes: the reporting API's memory for
// decoded tables, by default api.DefaultCacheBudget.
func (c config) apiCacheBytes() int64 {
	if c.APICacheBytes != "" {
		n, _ := parseByteSize(c.APICacheBytes)
		return n
	}
	return api.DefaultCacheBudget()
}
