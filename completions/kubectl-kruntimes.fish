# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_kubectl_kruntimes_global_optspecs
    string join \n kubeconfig= context= n/namespace= cluster= user= s/server= token= certificate-authority= insecure-skip-tls-verify as= as-group= request-timeout= v/v= log-format= h/help V/version
end

function __fish_kubectl_kruntimes_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_kubectl_kruntimes_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_kubectl_kruntimes_using_subcommand
    set -l cmd (__fish_kubectl_kruntimes_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -s V -l version -d 'Print version'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "install" -d 'Install or update kruntimes (server-side apply): the CRDs, the user ClusterRoles, the admission policies and the scheduler Deployment with its image'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "uninstall" -d 'Remove the scheduler and the user ClusterRoles; the CRDs, every Run and the admission policies stay unless --delete-crds'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "runtimed" -d 'The agent inside a Runtime Pod: heartbeat, local admission, execution of Task Runs'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "scheduler" -d 'The scheduler controller manager'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "explain" -d 'Explain why a Run is or is not placed: replays the scheduler\'s plugins on a live snapshot of its Runtime Pods (reads only). For a WorkflowRun: its jobs, the Run each step is, and why each waits'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "status" -d 'The pool at a glance: per Runtime, Pods available, used/capacity per resource, Runs by phase and the Pending demand by the scheduler\'s reasons (reads only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "invoke" -d 'Call a Ready function Run once: sends the data to its runtimed through the Run\'s invoke subresource (subresources.kruntimes.io; RBAC on runs/invoke decides who may) and prints the handler\'s output'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "logs" -d 'Print a Run\'s output (stdout and stderr, as its runtimed keeps them on the Pod\'s workspace volume), read through the Run\'s log subresource (subresources.kruntimes.io) like invoke'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "artifacts" -d 'List a Run\'s stored artifacts (status.artifactRefs), or download them through the Run\'s artifacts subresource (subresources.kruntimes.io) like logs'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "run" -d 'Create a Run (a command, a script or a function on a Runtime) and, with --wait, stream its log and exit with its task\'s exit code'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "wait" -d 'Wait until Runs meet a condition (by default, that they Succeeded); a Run that ended without meeting it fails the command at once, with its reason'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "cancel" -d 'Cancel Runs: sets spec.cancelRequested (one way); a Pending Run ends in the scheduler, a Scheduled or Running one once runtimed has stopped it'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "workflow" -d 'Workflows: trigger one (a WorkflowRun of its jobs, its inputs bound) and, with --wait, follow its jobs until it ends'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "wf" -d 'Workflows: trigger one (a WorkflowRun of its jobs, its inputs bound) and, with --wait, follow its jobs until it ends'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "dev" -d 'Run the whole system on this machine: etcd and kube-apiserver, the CRDs, the scheduler, and a local Pod host that runs a real runtimed for every Runtime Pod'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "completion" -d 'Print a shell completion script (e.g. `source <(kubectl kruntimes completion bash)`), or with `kubectl` the completion hook for `kubectl kruntimes <TAB>`'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "version" -d 'Print the version: release, git commit and date, Rust version, and the API versions this binary speaks'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "gen" -d 'Regenerate the committed completions/, man/ and deploy/crds/crds.yaml (`cargo xtask gen`)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "__complete" -d 'Completion candidates for the words after `kubectl kruntimes` (called by the hook `kubectl_complete-kruntimes`)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "copy-binary" -d 'Copy this executable to a path (the init container of Runtime Pods of any image)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l dry-run -d '`server` (also a bare `--dry-run`): the API server validates the apply and persists nothing; `client`: print what would be applied, as --print, touching no cluster; `none`: apply' -r -f -a "none\t''
client\t''
server\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l timeout -d 'How long to wait for the CRDs to become Established and, with --wait, for the scheduler to roll out (e.g. 60s, 2m)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l image -d 'The image of the scheduler, and of the runtimed that Runtime Pods copy from it' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l wait -d 'Wait until the scheduler has rolled out (`--wait=false`: return once it is applied)' -r -f -a "true\t''
false\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l print -d 'Write everything install applies as YAML to stdout and touch no cluster'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -s y -l yes -d 'Do not ask for confirmation'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l crds-only -d 'Only the cluster-wide part: the CRDs, the user and runtimed ClusterRoles and the admission policies; no scheduler (run it with `scheduler run`, or deploy it with the chart or `kubectl apply -k deploy/`)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand install" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l timeout -d 'How long to wait for the CRDs and their objects to be gone (with --delete-crds)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l delete-crds -d 'Also delete the CRDs: every Run, Runtime and PersistentWorkspace in every namespace (with their Runtime Pods), runtimed\'s ClusterRole and the admission policies'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -s y -l yes -d 'Do not ask for confirmation'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand uninstall" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l pod-name -d 'Name of the Runtime Pod this agent runs in' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l pod-namespace -d 'Namespace of the Runtime Pod' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l pod-uid -d 'UID of the Runtime Pod; the heartbeat Lease is held by it' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l heartbeat-interval -d 'How often the heartbeat Lease is renewed' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l routine-events -d 'Publish the Events of a Run\'s ordinary life too (Admitted, Started, Completed, RunSucceeded): off by default; every other Event (every Warning) is always published. The scheduler\'s `--routine-events` sets it in Runtime Pods' -r -f -a "true\t''
false\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l event-fold-window -d 'How long `Started` waits for a short task\'s end to take it in (one Event, not two); `0s`: at once. The scheduler\'s `--event-fold-window` sets it in Runtime Pods' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l claim-delay -d 'How long the claim of a started task waits before it is written (phase Running, startTime, Admitted=True): a task that ends within it is written once, claim and end together, as the kubelet writes a container that starts and ends within one sync. `0s`: each claim is written before its task starts. On SIGTERM every held claim is written at once. A runtimed that dies inside the window leaves its Run Scheduled: a process runs again once, claimed first; an execution its runtime server still holds is re-attached. Function Runs and retries always claim first' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l heartbeat-duration -d 'How long one renewal holds (the Lease\'s leaseDurationSeconds)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l shutdown-grace -d 'On SIGTERM/SIGINT, how long running Runs may take to finish before they are killed (keep it below the Pod\'s terminationGracePeriodSeconds; the Runtime controller sets it)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l health-probe-bind-address -d 'Address of /healthz and /readyz (ready once the Runs and the Pod are watched, until shutdown begins); `0` disables them' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l metrics-bind-address -d 'Address of /metrics (admissions, admission wait, dispatch latency, reservations, status-write retries); `0` disables it' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l api-bind-address -d 'Address of runtimed\'s API (TLS: /invoke, /logs, /artifacts), which answers only the kruntimes gateway; `0` disables it' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l gateway-user -d 'The account whose tokens runtimed\'s API takes: the gateway\'s (comma-separated for more)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l workspace-root -d 'The Pod\'s workspace volume: a Run that names a PersistentWorkspace runs in DIR/persistent/<workspace>, created on first use (its status.path is /workspace/persistent/<workspace>)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l state-dir -d 'Where runtimed keeps its own files: the Runs\' logs and their end markers, and the staged copies of S3 artifacts (default: WORKSPACE_ROOT/.kruntimes). The Runtime controller mounts a volume of runtimed\'s alone here, so that no task writes them' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l runtime-server -d 'The Pod\'s runtime server (HOST:PORT of its `runtime` container, gRPC on the Runtime\'s spec.port): Runs execute there through the runtime contract instead of as runtimed\'s own processes, survive a runtimed restart, and the server\'s Health is part of runtimed\'s readiness. Unset: runtimed runs each Run\'s task itself' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l git-timeout -d 'How long a Run\'s Git source (spec.source.repoURL) may take to fetch and check out; then the Run fails StartFailed' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l git-max-bytes -d 'The most bytes a Run\'s Git checkout may hold (.git included); a larger one fails the Run StartFailed' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l git-ca-file -d 'PEM CA certificates to trust for Git over https, besides Mozilla\'s roots and the system\'s (a Git server with a private CA)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-root -d 'Where the Runtime\'s filesystem artifact store (its spec.artifactStore claim) is mounted; with --artifact-volume-claim, Runs get $KRUNTIME_ARTIFACTS_DIR and what a successful one leaves there is stored (the Runtime controller sets both)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-volume-claim -d 'The PersistentVolumeClaim of the artifact store (recorded in each artifact\'s ref)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-s3-bucket -d 'The bucket of the Runtime\'s S3 artifact store (spec.artifactStore.s3): Runs get $KRUNTIME_ARTIFACTS_DIR and what a successful one leaves there is uploaded, with the credentials of --artifact-s3-credentials-dir (else web identity, container or instance credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-s3-prefix -d 'Prepended to the S3 store\'s keys' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-s3-region -d 'The S3 store\'s region (default: AWS_REGION, else us-east-1)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-s3-endpoint -d 'An S3-compatible service\'s URL instead of AWS\'s (MinIO, Ceph RGW, …)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-s3-credentials-secret -d 'The Secret that holds the S3 store\'s credentials (recorded in status.artifactStore; the credentials themselves are read from --artifact-s3-credentials-dir)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-s3-credentials-dir -d 'A directory of the S3 store\'s credentials as files named AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and optionally AWS_SESSION_TOKEN (the credentialsSecretName Secret mounted as a volume, in runtimed\'s container only), read once at start: runtimed keeps no secret in its environment, where a task running as its user could read it' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-s3-upload-part-size -d 'Artifacts larger than this are uploaded in parts of this size (at least 5 MiB)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-s3-upload-concurrency -d 'Parts of one artifact uploaded at once' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-driver -d 'The Runtime\'s artifact store driver when it is neither `filesystem` nor `s3`: Runs get $KRUNTIME_ARTIFACTS_DIR, and one that leaves artifacts fails ArtifactInvalid saying this runtimed cannot store them (none is dropped silently)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-max-bytes -d 'The largest artifact, in bytes (a directory: its tar.gz)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifacts-max-bytes -d 'All of one Run\'s artifacts together, in bytes' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-gc-interval -d 'How often the artifacts of deleted Runs are removed from the store' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l artifact-s3-force-path-style -d 'Address the S3 store\'s bucket in the path, not in the host name'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand runtimed" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -f -a "run" -d 'Run the Runtime controller and the scheduler, with leader election and metrics'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and not __fish_seen_subcommand_from run help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l workers -d 'Pending and Failed status writes in flight (cycles are serial, one pop of the queue at a time; Binds have 64 slots of their own)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l watch-namespace -d 'Watch only this namespace (default: all namespaces)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l leader-elect -d 'Elect a leader on a Lease so only one replica schedules' -r -f -a "true\t''
false\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l leader-election-namespace -d 'Namespace of the leader-election Lease `kruntimes-scheduler` (default: $POD_NAMESPACE, then the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l leader-election-identity -d 'Identity in the leader-election Lease (default: Pod or host name plus process id)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l leader-election-lease-duration -d 'How long a leader\'s Lease is valid without renewal; a standby takes over after it' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l metrics-bind-address -d 'Address of the /metrics endpoint (`0` disables it)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l metrics-secure -d 'Serve /metrics over TLS, only to callers whose bearer token the API server accepts and authorises to get /metrics (TokenReview and SubjectAccessReview, as controller-runtime\'s secure metrics); `false` serves plain HTTP to anyone' -r -f -a "true\t''
false\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l metrics-cert-dir -d 'Directory holding tls.crt and tls.key for /metrics (a mounted Secret, from cert-manager say); without it a self-signed certificate is made at start' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l health-probe-bind-address -d 'Address of /healthz and /readyz (`0` disables them)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l gateway-bind-address -d 'Address of the gateway, the aggregated API of Runs\' subresources (subresources.kruntimes.io: runs/log, runs/invoke, runs/artifacts) through which kubectl kruntimes logs, invoke and artifacts reach runtimed; served over TLS to the API server\'s front proxy by every replica; `0` disables it' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l gateway-cert-dir -d 'Directory holding the gateway\'s tls.crt and tls.key (cert-manager\'s, whose CA injector fills the APIService\'s caBundle); without it the gateway keeps a CA and a certificate in Secret kubectl-kruntimes-gateway-tls of its namespace, renews them, and writes the CA to the APIService' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l gateway-service-account -d 'The ServiceAccount whose tokens the gateway presents to runtimed (default: the one the scheduler runs as)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l pod-lost-grace -d 'How long a Runtime Pod\'s runtimed heartbeat may be stale (or its Lease missing) before the Runs running there are failed with reason RuntimePodLost, as on a lost node' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l starvation-threshold -d 'How long the oldest Pending Run of a Runtime that does not fit may wait while later Runs are placed before the scheduler nominates a Runtime Pod for it (status.nominatedPodName) and leaves room there for it' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l fair-share-metrics-groups -d 'How many fairness groups (those with the most Pending Runs) get series in kruntimes_scheduler_fair_share and kruntimes_scheduler_fair_share_pending_runs; 0: none' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l runtime-image -d 'The kruntimes image whose binary the Runtime controller copies into every Runtime Pod (an init container); deploy/ sets it to the image the scheduler runs from' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l runtimed-requests -d 'Requests of the containers kruntimes adds to Runtime Pods (the init container and the runtimed sidecar), as `kubectl set resources` takes them; `""`: none' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l routine-events -d 'Publish the Events of a Run\'s ordinary life too (Scheduled, Admitted, Started, Completed, RunSucceeded): off by default, one API write per Run saved, as the Go project writes none; every other Event (every Warning) is always published. Runtime Pods\' runtimed gets the same setting' -r -f -a "true\t''
false\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l event-fold-window -d 'How long a routine Event waits for the Run\'s next one to take it in (`Scheduled` is published only for a Run not started by then; runtimed\'s `Started` joins a short task\'s end); `0s`: each is published at once. Runtime Pods\' runtimed gets the same setting' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l claim-delay -d 'How long runtimed in Runtime Pods holds a started task\'s claim (its `--claim-delay`): a task that ends within it costs one status write, not two. An unclaimed Run bound less than this plus 2 s ago is taken for possibly started: not sent back from a terminating Pod nor preempted as unstarted until then. `0s`: claims are written before tasks start' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l runtimed-limits -d 'Their limits (a compute ResourceQuota requires both); `""`: none' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from help" -f -a "run" -d 'Run the Runtime controller and the scheduler, with leader election and metrics'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand scheduler; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -s o -l output -d 'Output format: `table`, `wide` (every advertised resource), `json`, `yaml` (a documented structure for scripts), `name`, `jsonpath=TEMPLATE` or `custom-columns=HEADER:PATH,…` (one row per Run)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l color -d 'When to color the table (auto: only on a terminal and when NO_COLOR is unset)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand explain" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -s l -l selector -d 'Only the Runtimes this label selector selects (`-l team=a,tier!=batch`, as kubectl)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -s o -l output -d 'Output format: `table` (the pool view; `wide` is the same), `json` or `yaml` (a documented structure for scripts and dashboards), `name` (the Runtimes), `jsonpath=TEMPLATE` or `custom-columns=HEADER:PATH,…` (one row per Runtime)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l interval -d 'How often --watch refreshes' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l color -d 'When to color the view (auto: only on a terminal and when NO_COLOR is unset)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -s A -l all-namespaces -d 'Every namespace (overrides -n)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -s w -l watch -d 'Print a new view every --interval until Ctrl-C (in place on a terminal)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand status" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -s d -l data -d 'The invocation\'s input: `@FILE`, `-` for stdin, or the text itself (at most 1 MiB; none: empty)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l content-type -d 'The input\'s media type, passed to the runtime server (the Go project\'s Bash runtime takes only application/json)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand invoke" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l tail -d 'Only the last N lines (-1: all)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -s f -l follow -d 'Keep printing what the Run writes until its execution ends'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand logs" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l download -d 'Write every artifact into DIR (a directory artifact as NAME.tar.gz), each checked against its digest' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -s o -l output -d 'Output format of the list: `table`, `wide`, `json`, `yaml`, `name` (artifact names), `jsonpath=TEMPLATE` or `custom-columns=HEADER:PATH,…` (one row per artifact)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand artifacts" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -s r -l runtime -d 'The Runtime that runs it (spec.runtime)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -s f -l file -d 'The script to run (spec.source.inline), from FILE, or `-` for stdin' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l inline -d 'The script to run itself (spec.source.inline)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l repo-url -d 'Fetch the code from this Git repository (spec.source.repoURL, https)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l commit-sha -d 'The commit of --repo-url to check out (spec.source.commitSHA)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l entrypoint -d 'The file of the source to run (spec.mode.task.entrypoint)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l handler -d 'Serve a function instead of running a task (spec.mode.function.handler, e.g. main.handler)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -s e -l env -d 'An environment variable of the task, KEY=VALUE (repeatable)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l request -d 'A resource the Run requests, NAME=QUANTITY (repeatable; default runs=1)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l timeout -d 'How long it may run once started (spec.timeout, e.g. 10m)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l retry-attempts -d 'Attempts in all, the first included (spec.retryPolicy.maxAttempts)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l retry-backoff -d 'The wait before the second attempt, doubled for each next one (spec.retryPolicy.backoff; default 1s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l priority-class -d 'spec.priorityClassName' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l wait-timeout -d 'How long --wait waits for the end' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -s o -l output -d 'Print the Run: `name`, `yaml`, `json`, `jsonpath=TEMPLATE` or `custom-columns=HEADER:PATH,…` (default: `run.kruntimes.io/NAME created`)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l dry-run -d '`client`: print it without sending it; `server`: the API server checks it (admission policies included) and stores nothing; `none`: create it' -r -f -a "none\t''
client\t''
server\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -s w -l wait -d 'Stream its log until it ends, then exit with its task\'s exit code (1 when it ended otherwise than by its task\'s exit, its reason on stderr)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand run" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l for -d 'What to wait for: `phase=PHASE`, `condition=TYPE[=STATUS]` (STATUS defaults to True; `condition=Finished` is met by every end), `ended` (any end, or deleted) or `delete`' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l timeout -d 'How long to wait' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wait" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -s l -l selector -d 'Every Run whose labels match this selector (`key=value,key!=value,key in (a,b)`, as kubectl\'s), instead of names' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l timeout -d 'How long --wait waits' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -s A -l all-namespaces -d 'With -l: in every namespace (overrides -n)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l wait -d 'Wait until every cancelled Run has ended'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand cancel" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -f -a "trigger" -d 'Trigger a Workflow: create a WorkflowRun of its jobs with its inputs bound (--set), as the Go kruntimes `krt workflow trigger` does'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -f -a "cancel" -d 'Cancel WorkflowRuns: set spec.cancelRequested, which the workflow controller passes to every Run and nested WorkflowRun still running, as the Go kruntimes `krt workflowrun cancel` does'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and not __fish_seen_subcommand_from trigger cancel help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l name -d 'The WorkflowRun\'s name (default: generated from the Workflow\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l set -d 'An input of the Workflow, KEY=VALUE (repeatable)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l timeout -d 'How long --wait waits' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -s w -l wait -d 'Follow its jobs until it ends; exit non-zero unless it Succeeded'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from trigger" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l timeout -d 'How long --wait waits' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -s w -l wait -d 'Wait until every cancelled WorkflowRun has ended'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from cancel" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from help" -f -a "trigger" -d 'Trigger a Workflow: create a WorkflowRun of its jobs with its inputs bound (--set), as the Go kruntimes `krt workflow trigger` does'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from help" -f -a "cancel" -d 'Cancel WorkflowRuns: set spec.cancelRequested, which the workflow controller passes to every Run and nested WorkflowRun still running, as the Go kruntimes `krt workflowrun cancel` does'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand workflow; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -f -a "trigger" -d 'Trigger a Workflow: create a WorkflowRun of its jobs with its inputs bound (--set), as the Go kruntimes `krt workflow trigger` does'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -f -a "cancel" -d 'Cancel WorkflowRuns: set spec.cancelRequested, which the workflow controller passes to every Run and nested WorkflowRun still running, as the Go kruntimes `krt workflowrun cancel` does'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and not __fish_seen_subcommand_from trigger cancel help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l name -d 'The WorkflowRun\'s name (default: generated from the Workflow\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l set -d 'An input of the Workflow, KEY=VALUE (repeatable)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l timeout -d 'How long --wait waits' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -s w -l wait -d 'Follow its jobs until it ends; exit non-zero unless it Succeeded'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from trigger" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l timeout -d 'How long --wait waits' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -s w -l wait -d 'Wait until every cancelled WorkflowRun has ended'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from cancel" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from help" -f -a "trigger" -d 'Trigger a Workflow: create a WorkflowRun of its jobs with its inputs bound (--set), as the Go kruntimes `krt workflow trigger` does'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from help" -f -a "cancel" -d 'Cancel WorkflowRuns: set spec.cancelRequested, which the workflow controller passes to every Run and nested WorkflowRun still running, as the Go kruntimes `krt workflowrun cancel` does'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand wf; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l data-dir -d 'Where etcd\'s data, the certificates, the logs and DIR/kubeconfig (context kruntimes-dev) live; starting again on the same DIR keeps every Runtime and Run [default: $XDG_STATE_HOME/kruntimes/dev, else ~/.local/state/kruntimes/dev]' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l demo-timeout -d 'How long --demo waits for its Runs to finish' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l demo -d 'Apply examples/, show the Runs\' progress until they finish, explain a Run that had to wait, then stop everything and exit'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand dev" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand completion" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -s o -l output -d 'Output format: `text`, `json`, `yaml`, `jsonpath=TEMPLATE` or `custom-columns=HEADER:PATH,…`' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand version" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l out -d 'The repository root to write completions/, man/ and deploy/crds/crds.yaml into' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand gen" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand __complete" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l kubeconfig -d 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l context -d 'The kubeconfig context to use' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -s n -l namespace -d 'Namespace (default: the context\'s namespace)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l cluster -d 'The kubeconfig cluster to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l user -d 'The kubeconfig user to use (instead of the context\'s)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -s s -l server -d 'The address of the Kubernetes API server (instead of the kubeconfig\'s; with --token, no kubeconfig is needed)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l token -d 'Bearer token for authentication to the API server (instead of the kubeconfig user\'s credentials)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l certificate-authority -d 'Path to a PEM file of the certificate authority that signed the API server\'s certificate' -r -F
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l as -d 'Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l as-group -d 'Group to impersonate for the operation; repeat for more groups' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l request-timeout -d 'How long one request to the API server may take (e.g. 30s, 1m; 0: no limit)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -s v -l v -l verbose -d 'Log verbosity, as kubectl\'s `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace (`-v` alone: 2; default: the command\'s own, warnings for the CLI)' -r
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l log-format -d 'Log format' -r -f -a "text\t''
json\t''"
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -l insecure-skip-tls-verify -d 'Do not verify the API server\'s certificate (insecure: for test clusters only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand copy-binary" -s h -l help -d 'Print help'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "install" -d 'Install or update kruntimes (server-side apply): the CRDs, the user ClusterRoles, the admission policies and the scheduler Deployment with its image'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "uninstall" -d 'Remove the scheduler and the user ClusterRoles; the CRDs, every Run and the admission policies stay unless --delete-crds'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "runtimed" -d 'The agent inside a Runtime Pod: heartbeat, local admission, execution of Task Runs'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "scheduler" -d 'The scheduler controller manager'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "explain" -d 'Explain why a Run is or is not placed: replays the scheduler\'s plugins on a live snapshot of its Runtime Pods (reads only). For a WorkflowRun: its jobs, the Run each step is, and why each waits'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "status" -d 'The pool at a glance: per Runtime, Pods available, used/capacity per resource, Runs by phase and the Pending demand by the scheduler\'s reasons (reads only)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "invoke" -d 'Call a Ready function Run once: sends the data to its runtimed through the Run\'s invoke subresource (subresources.kruntimes.io; RBAC on runs/invoke decides who may) and prints the handler\'s output'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "logs" -d 'Print a Run\'s output (stdout and stderr, as its runtimed keeps them on the Pod\'s workspace volume), read through the Run\'s log subresource (subresources.kruntimes.io) like invoke'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "artifacts" -d 'List a Run\'s stored artifacts (status.artifactRefs), or download them through the Run\'s artifacts subresource (subresources.kruntimes.io) like logs'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "run" -d 'Create a Run (a command, a script or a function on a Runtime) and, with --wait, stream its log and exit with its task\'s exit code'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "wait" -d 'Wait until Runs meet a condition (by default, that they Succeeded); a Run that ended without meeting it fails the command at once, with its reason'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "cancel" -d 'Cancel Runs: sets spec.cancelRequested (one way); a Pending Run ends in the scheduler, a Scheduled or Running one once runtimed has stopped it'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "workflow" -d 'Workflows: trigger one (a WorkflowRun of its jobs, its inputs bound) and, with --wait, follow its jobs until it ends'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "dev" -d 'Run the whole system on this machine: etcd and kube-apiserver, the CRDs, the scheduler, and a local Pod host that runs a real runtimed for every Runtime Pod'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "completion" -d 'Print a shell completion script (e.g. `source <(kubectl kruntimes completion bash)`), or with `kubectl` the completion hook for `kubectl kruntimes <TAB>`'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "version" -d 'Print the version: release, git commit and date, Rust version, and the API versions this binary speaks'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "gen" -d 'Regenerate the committed completions/, man/ and deploy/crds/crds.yaml (`cargo xtask gen`)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "__complete" -d 'Completion candidates for the words after `kubectl kruntimes` (called by the hook `kubectl_complete-kruntimes`)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "copy-binary" -d 'Copy this executable to a path (the init container of Runtime Pods of any image)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and not __fish_seen_subcommand_from install uninstall runtimed scheduler explain status invoke logs artifacts run wait cancel workflow dev completion version gen __complete copy-binary help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and __fish_seen_subcommand_from scheduler" -f -a "run" -d 'Run the Runtime controller and the scheduler, with leader election and metrics'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and __fish_seen_subcommand_from workflow" -f -a "trigger" -d 'Trigger a Workflow: create a WorkflowRun of its jobs with its inputs bound (--set), as the Go kruntimes `krt workflow trigger` does'
complete -c kubectl-kruntimes -n "__fish_kubectl_kruntimes_using_subcommand help; and __fish_seen_subcommand_from workflow" -f -a "cancel" -d 'Cancel WorkflowRuns: set spec.cancelRequested, which the workflow controller passes to every Run and nested WorkflowRun still running, as the Go kruntimes `krt workflowrun cancel` does'
