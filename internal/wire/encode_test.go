package wire

import (
	"encoding/json"
	"testing"
)

// FuzzAppendString: AppendString writes what json.Marshal writes for the
// same string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&amp;</a>", "\x00\x08\x0c\n\r\t\x1f\x7f", "\u2028\u2029", "\xff\xfe\xc3", "日本語 🙂"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal = %s", s, got[1:], want)
		}
	})
}
