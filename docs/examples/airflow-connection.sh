# The cncf-kubernetes connection `kubernetes_default`, pointing at the lab's kubeconfig (run where that file is).
export AIRFLOW_CONN_KUBERNETES_DEFAULT='{"conn_type": "kubernetes", "extra": {"kube_config_path": "'"$PWD"'/lab-kubeconfig.yaml"}}'
