// Command corpusgen writes the evaluation corpus, evaluator/testdata/corpus.jsonl:
// one case a line, {"name", "in" (or "in64"), "want"}, where "in" is an
// `mf eval` input line and "want" the expected output line, both as JSON
// strings so that every runner compares bytes. The expected results come
// from package oracle, a plain reference implementation independent of
// package evaluator. The cases are generated from a fixed seed, so a run
// always writes the same file.
//
// It also writes evaluator/testdata/document_100.json, a server document of
// 100 flags for the document benchmarks.
//
//	go run ./evaluator/internal/corpusgen [-dir evaluator/testdata]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Seed is the fixed seed of the random parts of the corpus.
const Seed = 20250611

func main() {
	dir := flag.String("dir", "evaluator/testdata", "directory to write corpus.jsonl and document_100.json into")
	flag.Parse()
	err := writeFile(filepath.Join(*dir, "corpus.jsonl"), write)
	if err == nil {
		err = writeFile(filepath.Join(*dir, "document_100.json"), writeDocument)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "corpusgen:", err)
		os.Exit(1)
	}
}

func writeFile(path string, write func(io.Writer) (int, error)) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cannot create corpus file %q: %w", path, err)
	}
	w := bufio.NewWriter(f)
	n, err := write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot write corpus file %q: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "corpusgen: wrote %d items to %s\n", n, path)
	return nil
}

// write generates the corpus into w and returns the number of cases.
func write(w io.Writer) (int, error) {
	cases := generate(Seed)
	for _, c := range cases {
		if _, err := w.Write(c.encode()); err != nil {
			return 0, err
		}
	}
	return len(cases), nil
}

// writeDocument writes a server document of 100 flags of mixed shapes.
func writeDocument(w io.Writer) (int, error) {
	flags := M{}
	g := &gen{rng: rand.New(rand.NewPCG(Seed, 100)), seen: map[string]int{}}
	for i := 0; i < 100; i++ {
		f := g.randomFlag()
		f["s"] = fmt.Sprintf("%012x", g.rng.Uint64()&0xffffffffffff)
		if i%10 == 0 {
			f["w"] = 1
		}
		flags[fmt.Sprintf("flag-%03d", i)] = f
	}
	doc := M{"v": 1, "at": 1767225600000, "flags": flags}
	_, err := io.WriteString(w, enc(doc)+"\n")
	return 100, err
}
