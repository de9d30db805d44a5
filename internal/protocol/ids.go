package protocol

import (
	"strings"

	"github.com/google/uuid"
)

// MaxThreadID is the longest thread id a client may choose.
const MaxThreadID = 128

// CanonicalThread checks a client-chosen thread id (an agentchat
// session_id, an AG2 chat_id, a Loom or AgentLoop thread_id, a threads-API
// UUID) and returns the id of the thread it names. An id is 1 to
// MaxThreadID characters from A-Z a-z 0-9 and . _ ~ : @ + = / -; a UUID in
// its 8-4-4-4-12 form names the thread of its lower-case form, so every
// protocol reaches one thread whatever the case a client writes it in.
func CanonicalThread(id string) (string, error) {
	if id == "" {
		return "", Errorf(CodeInvalid, "a thread id is required")
	}
	if len(id) > MaxThreadID {
		return "", Errorf(CodeInvalid, "a thread id has at most %d characters, not %d", MaxThreadID, len(id))
	}
	for i := 0; i < len(id); i++ {
		if !idChar(id[i]) {
			return "", Errorf(CodeInvalid, "a thread id is made of letters, digits and . _ ~ : @ + = / -; %q is not", id[i:i+1])
		}
	}
	if len(id) == 36 {
		if u, err := uuid.Parse(id); err == nil {
			return u.String(), nil
		}
	}
	return id, nil
}

func idChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("._~:@+=/-", c) >= 0
}

// CheckText refuses a user message with nothing but whitespace, on every
// protocol alike.
func CheckText(text string) error {
	if strings.TrimSpace(text) == "" {
		return Errorf(CodeInvalid, "the message is empty")
	}
	return nil
}
