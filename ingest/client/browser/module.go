package browser

import (
	_ "embed" // the module served to browsers
	"regexp"
)

// Source is mf.mjs as written.
//
//go:embed mf.mjs
var Source []byte

// Types is mf.d.ts.
//
//go:embed mf.d.ts
var Types []byte

var versionRE = regexp.MustCompile(`(?m)^export const VERSION = '([0-9A-Za-z.+-]+)';$`)

// Version is the module's own version (its VERSION constant), which names
// the immutable URL /v1/sdk/{version}/mf.mjs. It is "" when the source has
// no such constant (TestVersion fails then).
func Version() string {
	m := versionRE.FindSubmatch(Source)
	if m == nil {
		return ""
	}
	return string(m[1])
}
