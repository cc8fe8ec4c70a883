package main

import (
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/describe"
	"github.com/staticpodd/staticpodd/daemon"
	"github.com/staticpodd/staticpodd/oci/image"
)

// completePodArgs makes the commands that take a POD offer the running
// daemon's pods for shell completion.
func completePodArgs(root *cobra.Command, o *globalOptions) {
	for _, c := range root.Commands() {
		if slices.Contains([]string{"ps", "describe", "logs", "exec", "debug", "restart"}, c.Name()) {
			c.ValidArgsFunction = completePods(o)
		}
	}
}

// completePods offers the running daemon's pods for shell completion (cobra's
// ValidArgsFunction): nothing, and no file names, when it does not answer.
func completePods(o *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		o.fromEnv(cmd.Flags()) // completion runs no PersistentPreRun
		var list v1.PodList
		if daemon.NewClient(filepath.Join(o.RunDir, socketName)).GetJSON(cmd.Context(), "/pods", &list) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return describe.PodCompletions(list.Items, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeImageRefs makes the subcommands of images that take REFs offer the
// store's references for shell completion.
func completeImageRefs(images *cobra.Command, o *globalOptions, open func(...image.Option) (*image.Store, error)) {
	offer := func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		o.fromEnv(cmd.Flags())
		var imgs []image.Image
		s, err := open()
		if err == nil {
			imgs, err = s.List()
		}
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var refs []string
		for _, img := range imgs {
			refs = append(refs, img.Refs...)
		}
		return describe.ImageCompletions(refs, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	for _, sub := range images.Commands() {
		if slices.Contains([]string{"rm", "pin", "unpin", "export"}, sub.Name()) {
			sub.ValidArgsFunction = offer
		}
	}
}
