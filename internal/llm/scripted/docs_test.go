package scripted_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm/scripted"
)

// TestDocumentedExamples keeps docs/SCENARIOS.md honest: every YAML block
// in it is a complete scenario that loads and plays.
func TestDocumentedExamples(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/SCENARIOS.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	require.Greater(t, len(blocks), 10)
	for i, b := range blocks {
		name := fmt.Sprintf("SCENARIOS.md yaml block %d", i+1)
		s, err := scripted.Parse(name, b[1])
		require.NoError(t, err, "%s:\n%s", name, b[1])
		// play checks the stream keeps the llm.Model contract.
		play(t, scripted.New(s, scripted.WithPacing(scripted.Pacing{})), req(user("hello")))
	}
}
