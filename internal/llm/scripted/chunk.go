package scripted

import (
	"unicode"
	"unicode/utf8"
)

// argsChunk is the default size, in characters, of a tool call's argument
// fragments: small enough that every call streams as several deltas.
const argsChunk = 8

// split cuts s into the fragments a turn streams: n characters each when
// n > 0, word by word when n == 0, whole when n < 0. The fragments always
// concatenate to s; an empty s has none.
func split(s string, n int) []string {
	switch {
	case s == "":
		return nil
	case n < 0:
		return []string{s}
	case n == 0:
		return words(s)
	}
	var out []string
	for len(s) > 0 {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// words cuts s after each run of white space, so every fragment is a word
// with the space that follows it ("Hello, ", "world."); leading space stays
// with the first word.
func words(s string) []string {
	var out []string
	start := 0
	inSpace, seenWord := false, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if inSpace && !space && seenWord {
			out = append(out, s[start:i])
			start = i
		}
		inSpace = space
		seenWord = seenWord || !space
	}
	return append(out, s[start:])
}
