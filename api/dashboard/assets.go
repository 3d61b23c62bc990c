package dashboard

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed assets
var embedded embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	contentType string
	body        []byte
	gzipped     []byte // nil when gzip does not make it smaller
}

// assetSet is every asset and the version that names them.
type assetSet struct {
	version string
	files   map[string]*asset // by path under assets/, for example "pages/overview.js"
	index   []byte            // index.html with its placeholders filled in
}

var contentTypes = map[string]string{
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".html": "text/html; charset=utf-8",
	".json": "application/json",
}

// loadAssets reads the embedded files, versions them by a hash of their
// names and contents, and gzips them once.
func loadAssets(fsys fs.FS, apiPath string) (*assetSet, error) {
	set := &assetSet{files: map[string]*asset{}}
	var names []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list the dashboard's assets: %w", err)
	}
	sort.Strings(names)
	h := sha256.New()
	var index []byte
	for _, name := range names {
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("cannot read the dashboard's asset %s: %w", name, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(body))
		h.Write(body)
		if name == "index.html" {
			index = body
			continue
		}
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			return nil, fmt.Errorf("dashboard asset %s: no content type for its extension", name)
		}
		a := &asset{contentType: ct, body: body}
		if z := gzipBytes(body); len(z) < len(body) {
			a.gzipped = z
		}
		set.files[name] = a
	}
	if index == nil {
		return nil, fmt.Errorf("the dashboard's assets have no index.html")
	}
	set.version = hex.EncodeToString(h.Sum(nil))[:16]
	set.index = []byte(strings.NewReplacer("{{version}}", set.version, "{{api}}", apiPath).Replace(string(index)))
	return set, nil
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// Size is the dashboard's code as a browser downloads it.
type Size struct {
	Files      int // JavaScript and CSS files
	Bytes      int // their sizes
	GzipBytes  int // their sizes gzipped (as served)
	IndexBytes int // index.html
}

// size adds up the JavaScript and CSS.
func (s *assetSet) size() Size {
	out := Size{IndexBytes: len(s.index)}
	for name, a := range s.files {
		if e := path.Ext(name); e != ".js" && e != ".css" {
			continue
		}
		out.Files++
		out.Bytes += len(a.body)
		if a.gzipped != nil {
			out.GzipBytes += len(a.gzipped)
		} else {
			out.GzipBytes += len(a.body)
		}
	}
	return out
}
