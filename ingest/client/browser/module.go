package browser

import (
	_ "embed" // the module served to browsers
	"regexp"
)

// Source is mf.mjs as written: what the npm package exports.
//
//go:embed mf.mjs
var Source []byte

// Minified is dist/mf.mjs, Source minified by scripts/build.mjs (npm run
// build): what mf serves at /v1/sdk/.
//
//go:embed dist/mf.mjs
var Minified []byte

// Types is mf.d.mts.
//
//go:embed mf.d.mts
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
