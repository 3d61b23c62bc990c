package rollups

import "github.com/apache/arrow/go/v17/parquet/compress"

// The zstd codec of parquet-go 17 builds a new encoder (megabytes of
// tables) for every page it compresses through EncodeLevel, even at the
// default level, which its page writer always calls; that doubled the
// cost of writing a file and made most of its garbage. Encode at the
// default level uses one shared, concurrency-safe encoder and produces the
// same frames, so this registration (the way the library documents for
// replacing a codec: RegisterCodec in init) routes default-level calls to
// it. Other levels keep the library's behaviour.
func init() {
	if c, err := compress.GetCodec(compress.Codecs.Zstd); err == nil {
		if _, done := c.(zstdDefaultLevel); !done {
			compress.RegisterCodec(compress.Codecs.Zstd, zstdDefaultLevel{c})
		}
	}
}

// zstdDefaultLevel is the library's zstd codec with default-level block
// encoding through its shared encoder.
type zstdDefaultLevel struct{ compress.Codec }

func (z zstdDefaultLevel) EncodeLevel(dst, src []byte, level int) []byte {
	if level == compress.DefaultCompressionLevel {
		return z.Codec.Encode(dst, src)
	}
	return z.Codec.EncodeLevel(dst, src, level)
}
