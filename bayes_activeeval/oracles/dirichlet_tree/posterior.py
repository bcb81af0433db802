"""The full posteriors of the Dirichlet-tree oracle: the PyMC model and the exact conjugate draws.

Both are of the leaf-level model (Marchant & Rubinstein (2021), Sec. 4.1): ``θ ~ Dirichlet(α)``,
a Dirichlet per internal node and class on the branch probabilities (the Dirichlet-tree, Eq. 10),
and the labels as data. :class:`~bayes_activeeval.oracles.DirichletTreeOracle` calls these with its
priors ``α``, ``β`` and counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .tree import Tree, lse

__all__ = ["coords", "exact_posterior", "pymc_model"]


def coords(classes, tree: Tree) -> dict[str, Any]:
    """The dimensions of the posterior: ``class``, ``node`` (non-root) and ``stratum``.

    Parameters
    ----------
    classes : sequence
        The class values (converted to strings).
    tree : Tree
        The tree: nodes ``1..n_nodes-1`` and strata ``0..K-1``.

    Returns
    -------
    dict
        ``{"class": [...], "node": ndarray, "stratum": ndarray}``.
    """
    return {
        "class": [str(c) for c in classes],
        "node": np.arange(1, tree.n_nodes),
        "stratum": np.arange(tree.n_leaves),
    }


def pymc_model(
    tree: Tree,
    alpha: np.ndarray,
    beta: np.ndarray,
    obs: np.ndarray,
    classes,
    unlabeled: np.ndarray | None = None,
):
    """The PyMC model of :meth:`DirichletTreeOracle.pymc_model
    <bayes_activeeval.oracles.DirichletTreeOracle.pymc_model>`: ``obs`` the (K, C) label counts
    (importance-weighted for a stochastic oracle), ``unlabeled`` the unlabeled items per stratum
    (deterministic oracle: their labels are summed out) or ``None`` (stochastic oracle).

    Parameters
    ----------
    tree : Tree
        The tree (:func:`~bayes_activeeval.oracles.dirichlet_tree.tree.build_tree`).
    alpha : ndarray (C,)
        The concentrations ``α`` of the Dirichlet prior on ``θ``.
    beta : ndarray (n_nodes - 1, C)
        The concentrations ``β`` of the Dirichlet priors on the branch probabilities, per non-root
        node and class (a sibling group's rows are one Dirichlet per class).
    obs : ndarray (K, C)
        The label counts per stratum and class (importance-weighted for a stochastic oracle).
    classes : sequence
        The class values (named as strings in the ``class`` coordinate).
    unlabeled : ndarray (K,), optional
        The number of unlabeled items per stratum (default ``None``: a stochastic oracle).

    Returns
    -------
    pymc.Model
        With the free variables ``theta`` and ``branch_<m>`` (per number ``m`` of children), the
        deterministics ``branch`` (when the tree has more than one node) and ``pi``, and the
        counts as the data containers ``counts`` (and ``unlabeled``).
    """
    import pymc as pm
    import pytensor.tensor as pt

    K, C = obs.shape
    nonroot_parent = tree.parent[1:]
    counts = np.bincount(nonroot_parent, minlength=tree.n_nodes)
    internal = np.flatnonzero(counts > 0)
    with pm.Model(coords=coords(classes, tree)) as m:
        theta = pm.Dirichlet("theta", a=alpha, dims="class")
        log_theta = pt.log(theta)
        if tree.n_nodes > 1:
            pieces, order = [], []
            for mchild in np.unique(counts[internal]):
                nodes = internal[counts[internal] == mchild]
                # children of each node are contiguous (BFS numbering)
                first = np.array([np.flatnonzero(nonroot_parent == v)[0] for v in nodes])
                kids = first[:, None] + np.arange(mchild)[None, :]  # non-root row indices
                conc = beta[kids].transpose(0, 2, 1)  # (n_nodes_m, C, mchild)
                b = pm.Dirichlet(f"branch_{mchild}", a=conc, shape=conc.shape)
                pieces.append(pt.log(b).transpose(0, 2, 1).reshape((-1, C)))
                order.append(kids.ravel())
            perm = np.argsort(np.concatenate(order))
            log_b = pt.concatenate(pieces, axis=0)[perm]
            path = tree.path.T.toarray()
            log_joint = pt.dot(path, log_b) + log_theta[None, :]
            pm.Deterministic("branch", pt.exp(log_b), dims=("node", "class"))
        else:
            log_joint = pt.zeros((K, C)) + log_theta[None, :]
        lse = pm.math.logsumexp(log_joint, axis=1, keepdims=True)
        pm.Deterministic("pi", pt.exp(log_joint - lse), dims=("stratum", "class"))
        # the counts as data containers: models of the same tree share one compiled graph
        counts = pm.Data("counts", obs, dims=("stratum", "class"))
        if unlabeled is not None:
            unlabeled = pm.Data("unlabeled", unlabeled, dims="stratum")
            loglik = pt.sum(counts * log_joint) + pt.sum(unlabeled * lse[:, 0])
        else:
            loglik = pt.sum(counts * log_joint)
        pm.Potential("labels", loglik)
    return m


def exact_posterior(
    tree: Tree,
    alpha: np.ndarray,
    beta: np.ndarray,
    obs: np.ndarray,
    classes,
    draws: int,
    chains: int,
    gen: np.random.Generator,
):
    """Independent draws from the conjugate posterior of a stochastic oracle (App. H, Eq. 15):
    ``θ ~ Dir(α̃)``, ``b_ν ~ Dir(β̃_ν)``, as a DataTree (:func:`arviz_base.from_dict`).

    Parameters
    ----------
    tree : Tree
        The tree (:func:`~bayes_activeeval.oracles.dirichlet_tree.tree.build_tree`).
    alpha : ndarray (C,)
        The concentrations ``α`` of the Dirichlet prior on ``θ``.
    beta : ndarray (n_nodes - 1, C)
        The concentrations ``β`` of the Dirichlet priors on the branch probabilities, per non-root
        node and class (a sibling group's rows are one Dirichlet per class).
    obs : ndarray (K, C)
        The label counts per stratum and class (importance-weighted for a stochastic oracle).
    classes : sequence
        The class values (named as strings in the ``class`` coordinate).
    draws, chains : int
        Draws per chain and number of chains (all draws are independent).
    gen : numpy.random.Generator
        The random number generator.

    Returns
    -------
    xarray.DataTree
        Its ``posterior`` group holds ``theta`` (chain, draw, class), ``branch`` (chain, draw,
        node, class; only when the tree has more than one node) and ``pi`` (chain, draw,
        stratum, class).
    """
    from arviz_base import from_dict

    K, C = obs.shape
    S = draws * chains
    at = alpha + obs.sum(axis=0)
    g = gen.gamma(np.broadcast_to(at, (S, C)))
    theta = g / g.sum(axis=1, keepdims=True)
    data: dict[str, Any] = {}
    log_theta = np.log(theta)
    if tree.n_nodes > 1:
        bt = beta + tree.path @ obs  # (n_nr, C)
        gb = gen.gamma(np.broadcast_to(bt, (S, *bt.shape)))
        sums = np.einsum("ij,sjc->sic", tree.siblings.toarray(), gb)
        branch = gb / sums
        log_joint = np.einsum("ki,sic->skc", tree.path.T.toarray(), np.log(branch))
        data["branch"] = branch.reshape(chains, draws, *bt.shape)
    else:
        log_joint = np.zeros((S, K, C))
    log_joint = log_joint + log_theta[:, None, :]
    pi = np.exp(log_joint - lse(log_joint, axis=2, keepdims=True))
    data["theta"] = theta.reshape(chains, draws, C)
    data["pi"] = pi.reshape(chains, draws, K, C)
    dims = {"theta": ["class"], "branch": ["node", "class"], "pi": ["stratum", "class"]}
    return from_dict(
        {"posterior": data},
        coords=coords(classes, tree),
        dims={k: v for k, v in dims.items() if k in data},
        attrs={
            "posterior": {"inference": "exact conjugate (Marchant & Rubinstein (2021), App. H)"}
        },
    )
