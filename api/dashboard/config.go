package dashboard

import (
	"fmt"
	"strings"
)

// Config configures the dashboard.
type Config struct {
	// APIPath is the path of the reporting API on the dashboard's own
	// origin, which the pages call. Default /api/v1.
	APIPath string
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{APIPath: "/api/v1"}
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	if !strings.HasPrefix(c.APIPath, "/") || strings.HasSuffix(c.APIPath, "/") || strings.ContainsAny(c.APIPath, "\"<>?#' ") {
		return fmt.Errorf("dashboard config: APIPath must be a path on the same origin such as /api/v1, not %q", c.APIPath)
	}
	return nil
}
