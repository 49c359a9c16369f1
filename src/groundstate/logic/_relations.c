/* A stored relation's upkeep, compiled: new facts put into the fact set and every hash index, old ones taken out.
 *
 * ``storage.Relation`` holds ``facts`` (a set of tuples) and ``indexes`` (columns -> (key function, table)), a table
 * mapping a key to a bucket (a dict used as an insertion-ordered set of facts). Every evaluation files what it derives
 * and a supposition (the MCP guard's decision) takes it all out again: ten relations of one or two facts each per
 * decision, where a Python loop spent more time getting going than doing the work. These functions do exactly what
 * ``Relation.add`` and ``Relation.remove`` did in Python (the engine's property tests compare whole evaluations with
 * a reference that does not use them); they decide nothing.
 *
 * add(relation, new)     new (a set of facts not stored yet) into relation.facts and every index
 * remove(relation, old)  old (a set of stored facts) out of relation.facts and every index; an emptied bucket goes
 *                        (a negation tests a key's presence)
 * file(table, key, facts)  each fact into the bucket of key(fact), in one index table
 * undo(relations, changes)  each relation named in changes (predicate -> (inserted, deleted)) as it was before
 *                           them: the inserted facts removed, the deleted ones added back
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *facts_name, *indexes_name;

/* A fact into the bucket of its key ``k`` in ``table`` (the bucket made if it is the key's first). */
static int file_one(PyObject *table, PyObject *k, PyObject *fact) {
    PyObject *bucket = PyDict_GetItemWithError(table, k); /* borrowed */
    if (bucket != NULL) return PyDict_SetItem(bucket, fact, Py_None);
    if (PyErr_Occurred()) return -1;
    PyObject *fresh = PyDict_New();
    int failed = fresh == NULL || PyDict_SetItem(fresh, fact, Py_None) < 0 || PyDict_SetItem(table, k, fresh) < 0;
    Py_XDECREF(fresh);
    return failed ? -1 : 0;
}

/* A fact out of the bucket of its key ``k`` in ``table``; an emptied bucket goes (KeyError: the key has none). */
static int unfile_one(PyObject *table, PyObject *k, PyObject *fact) {
    PyObject *bucket = PyDict_GetItemWithError(table, k); /* borrowed */
    if (bucket == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, k);
        return -1;
    }
    if (PyDict_DelItem(bucket, fact) < 0) return -1;
    return PyDict_GET_SIZE(bucket) == 0 ? PyDict_DelItem(table, k) : 0;
}

/* ``one(table, key(fact), fact)`` for each of ``facts``: one index's loop, filing or unfiling. */
static int each_fact(PyObject *table, PyObject *key, PyObject *facts, int (*one)(PyObject *, PyObject *, PyObject *)) {
    PyObject *iterator = PyObject_GetIter(facts);
    if (iterator == NULL) return -1;
    PyObject *fact;
    while ((fact = PyIter_Next(iterator)) != NULL) {
        PyObject *k = PyObject_CallOneArg(key, fact);
        int failed = k == NULL || one(table, k, fact) < 0;
        Py_XDECREF(k);
        Py_DECREF(fact);
        if (failed) {
            Py_DECREF(iterator);
            return -1;
        }
    }
    Py_DECREF(iterator);
    return PyErr_Occurred() ? -1 : 0;
}

/* ``each_fact`` with ``one`` over every index (key, table) of relation.indexes. */
static int every_index(PyObject *relation, PyObject *facts, int (*one)(PyObject *, PyObject *, PyObject *)) {
    PyObject *indexes = PyObject_GetAttr(relation, indexes_name);
    if (indexes == NULL) return -1;
    if (!PyDict_Check(indexes)) {
        PyErr_SetString(PyExc_TypeError, "a relation's indexes must be a dict");
        Py_DECREF(indexes);
        return -1;
    }
    Py_ssize_t position = 0;
    PyObject *columns, *entry;
    while (PyDict_Next(indexes, &position, &columns, &entry)) {
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 || !PyDict_Check(PyTuple_GET_ITEM(entry, 1))) {
            PyErr_SetString(PyExc_TypeError, "an index must be a (key function, dict) pair");
            Py_DECREF(indexes);
            return -1;
        }
        Py_INCREF(entry); /* the loop body runs Python (the key function): keep the pair alive */
        int failed = each_fact(PyTuple_GET_ITEM(entry, 1), PyTuple_GET_ITEM(entry, 0), facts, one);
        Py_DECREF(entry);
        if (failed) {
            Py_DECREF(indexes);
            return -1;
        }
    }
    Py_DECREF(indexes);
    return 0;
}

static PyObject *fact_set(PyObject *relation) {
    PyObject *set = PyObject_GetAttr(relation, facts_name);
    if (set != NULL && !PySet_Check(set)) {
        PyErr_SetString(PyExc_TypeError, "a relation's facts must be a set");
        Py_CLEAR(set);
    }
    return set;
}

/* ``facts`` (a set) into or out of the relation: the fact set changed in place by ``change`` (|= or -=), then every
 * index by ``one``. ``what`` names the operation in the error for a non-set. */
static int update(PyObject *relation, PyObject *facts, binaryfunc change,
                  int (*one)(PyObject *, PyObject *, PyObject *), const char *what) {
    if (!PyAnySet_Check(facts)) {
        PyErr_Format(PyExc_TypeError, "%s takes a set of facts", what);
        return -1;
    }
    if (PySet_GET_SIZE(facts) == 0) return 0;
    PyObject *set = fact_set(relation);
    if (set == NULL) return -1;
    PyObject *changed = change(set, facts);
    Py_DECREF(set);
    if (changed == NULL) return -1;
    Py_DECREF(changed);
    return every_index(relation, facts, one);
}

static int add_to(PyObject *relation, PyObject *new) {
    return update(relation, new, PyNumber_InPlaceOr, file_one, "add");
}

static int remove_from(PyObject *relation, PyObject *old) {
    return update(relation, old, PyNumber_InPlaceSubtract, unfile_one, "remove");
}

static PyObject *add(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add(relation, new) takes two arguments");
        return NULL;
    }
    if (add_to(args[0], args[1]) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *remove_(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "remove(relation, old) takes two arguments");
        return NULL;
    }
    if (remove_from(args[0], args[1]) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *undo(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "undo(relations, changes) takes two dicts");
        return NULL;
    }
    PyObject *relations = args[0], *changes = args[1];
    Py_ssize_t position = 0;
    PyObject *predicate, *change;
    while (PyDict_Next(changes, &position, &predicate, &change)) {
        if (!PyTuple_Check(change) || PyTuple_GET_SIZE(change) != 2) {
            PyErr_SetString(PyExc_TypeError, "a change must be an (inserted, deleted) pair");
            return NULL;
        }
        PyObject *relation = PyDict_GetItemWithError(relations, predicate); /* borrowed */
        if (relation == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, predicate);
            return NULL;
        }
        Py_INCREF(relation);
        Py_INCREF(change); /* key functions run Python: keep what this pass reads alive */
        int failed = remove_from(relation, PyTuple_GET_ITEM(change, 0)) < 0 ||
                     add_to(relation, PyTuple_GET_ITEM(change, 1)) < 0;
        Py_DECREF(change);
        Py_DECREF(relation);
        if (failed) return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *file(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "file(table, key, facts) takes a dict, a key function and facts");
        return NULL;
    }
    if (each_fact(args[0], args[1], args[2], file_one) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL, "Put new facts into a relation and its indexes."},
    {"remove", (PyCFunction)(void (*)(void))remove_, METH_FASTCALL, "Take stored facts out of a relation."},
    {"file", (PyCFunction)(void (*)(void))file, METH_FASTCALL, "Put facts into one index table."},
    {"undo", (PyCFunction)(void (*)(void))undo, METH_FASTCALL, "Put relations back as they were before changes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "groundstate.logic._relations",
                                    "A stored relation's upkeep, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__relations(void) {
    facts_name = PyUnicode_InternFromString("facts");
    indexes_name = PyUnicode_InternFromString("indexes");
    if (facts_name == NULL || indexes_name == NULL) return NULL;
    return PyModule_Create(&module);
}
