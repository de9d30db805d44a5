package workflow_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/workflow"
)

// TestDocumentedExample keeps docs/WORKFLOWS.md honest: its YAML blocks
// are workflows that load.
func TestDocumentedExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/WORKFLOWS.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	require.NotEmpty(t, blocks)
	for i, b := range blocks {
		name := fmt.Sprintf("block%d", i+1)
		w, err := workflow.Parse(name, name+".yaml", b[1])
		require.NoError(t, err, "WORKFLOWS.md yaml block %d:\n%s", i+1, b[1])
		require.NotEmpty(t, w.Agents)
	}
}
