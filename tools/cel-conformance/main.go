// cel-conformance gives the real Kubernetes v1.37 verdict on DRA CEL device selectors.
//
// Input (stdin): a JSON array of cases {"id", "expression", "device": {"driver", "allowMultipleAllocations",
// "attributes", "capacity"}} (attributes/capacity in the ResourceSlice JSON shape). Output (stdout): a JSON
// array of {"id", "verdict", "detail"}, verdict one of "true", "false", "rejected" (API server validation),
// "error" (evaluation error at scheduling time).
//
// Validation is what kube-apiserver does for DeviceClass and ResourceClaim selectors:
// k8s.io/kubernetes v1.37.2 pkg/apis/resource/validation/validation.go validateCELExpression (length
// limit, dracel.GetCompiler(features).CompileCELExpression with environment.NewExpressions, then
// MaxCost > resourceapi.CELSelectorExpressionMaxCost is "too complex, exceeds cost limit").
// Evaluation is what kube-scheduler does: dynamic-resource-allocation v0.37.2 cel/cache.go GetOrCompile
// (no cost estimation) followed by CompilationResult.DeviceMatches.
//
// Feature gates are the v1.37 defaults (k8s.io/kubernetes v1.37.2 pkg/features/kube_features.go):
// DRAConsumableCapacity beta, on; DRAListTypeAttributes alpha, off. The environment's compatibility
// version comes from the binary's version, so build with the same -X ldflags as kube-apiserver (build).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type device struct {
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations,omitempty"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity,omitempty"`
}

type testCase struct {
	ID         string  `json:"id"`
	Expression string  `json:"expression"`
	Device     *device `json:"device,omitempty"`
}

type answer struct {
	ID      string `json:"id"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail,omitempty"`
}

var features = dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: false}

func validate(expression string) (string, bool) {
	if len(expression) > resourceapi.CELSelectorExpressionMaxLength {
		return fmt.Sprintf("Too long: may not be more than %d bytes", resourceapi.CELSelectorExpressionMaxLength), false
	}
	envType := environment.NewExpressions
	result := dracel.GetCompiler(features).CompileCELExpression(expression, dracel.Options{EnvType: &envType})
	if result.Error != nil {
		return result.Error.Detail, false
	}
	if result.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		return "too complex, exceeds cost limit", false
	}
	return "", true
}

func evaluate(expression string, d device) answer {
	result := dracel.GetCompiler(features).CompileCELExpression(expression, dracel.Options{DisableCostEstimation: true})
	if result.Error != nil {
		return answer{Verdict: "error", Detail: "scheduler compile: " + result.Error.Detail}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	matches, _, err := result.DeviceMatches(ctx, dracel.Device{
		Driver:                   d.Driver,
		AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes:               d.Attributes,
		Capacity:                 d.Capacity,
	})
	if err != nil {
		return answer{Verdict: "error", Detail: err.Error()}
	}
	return answer{Verdict: fmt.Sprint(matches)}
}

func verdict(c testCase) (a answer) {
	defer func() {
		if r := recover(); r != nil {
			a = answer{Verdict: "error", Detail: fmt.Sprintf("panic: %v", r)}
		}
	}()
	if detail, ok := validate(c.Expression); !ok {
		return answer{Verdict: "rejected", Detail: detail}
	}
	d := device{Driver: "dra.example.com"}
	if c.Device != nil {
		d = *c.Device
	}
	return evaluate(c.Expression, d)
}

func main() {
	var cases []testCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintln(os.Stderr, "error: reading cases from stdin:", err)
		os.Exit(1)
	}
	answers := make([]answer, 0, len(cases))
	for _, c := range cases {
		a := verdict(c)
		a.ID = c.ID
		answers = append(answers, a)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(answers); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
