"""What the launcher says about this job: the topology, the rendezvous's view of the nodes, who this node is.

Read from the environment torchrun, Slurm, SageMaker, Kubernetes or MPI set, and from a
socket: facts, like every backend's, never verdicts. The distributed run builds on them.
"""
