package cel

// Added to k8s.io/dynamic-resource-allocation/cel by `go test -overlay` (see ../extract): writes the
// expression and device of every entry of compile_test.go's `testcases` table as JSON, nothing else.

import (
	"encoding/json"
	"os"
	"testing"
)

func TestDumpConformanceCases(t *testing.T) {
	type device struct {
		Driver                   string `json:"driver"`
		AllowMultipleAllocations *bool  `json:"allowMultipleAllocations,omitempty"`
		Attributes               any    `json:"attributes,omitempty"`
		Capacity                 any    `json:"capacity,omitempty"`
	}
	type dumped struct {
		Name       string `json:"name"`
		Expression string `json:"expression"`
		Device     device `json:"device"`
	}
	var out []dumped
	for name, tc := range testcases {
		out = append(out, dumped{name, tc.expression, device{tc.driver, tc.allowMultipleAllocations, tc.attributes, tc.capacity}})
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("DRA_MIGRATE_DUMP"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
