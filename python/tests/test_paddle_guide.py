"""The PaddlePaddle LoD-Tensor user guide's samples, verbatim, with ``fluid``
replaced by ``lodt`` (``import paddle.fluid as fluid`` -> ``import lodt``).
The static-graph ``sequence_expand`` program is reproduced with the eager
``lodt.sequence_expand``."""

import contextlib
import io

import numpy as np
import pytest

import lodt


def run(source):
    """Runs a guide sample with fluid replaced by lodt; returns what it printed."""
    source = source.replace("import paddle.fluid as fluid", "import lodt")
    source = source.replace("import paddle\n", "")
    source = source.replace("fluid.", "lodt.")
    out = io.StringIO()
    namespace = {}
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<user guide>", "exec"), namespace)
    return out.getvalue(), namespace


CREATE = """
#Create lod-tensor
import paddle.fluid as fluid
import numpy as np

a = fluid.create_lod_tensor(np.array([[1],[1],[1],
                          [1],[1],
                          [1],[1],[1],[1],
                          [1],
                          [1],[1],
                          [1],[1],[1]]).astype('int64') ,
                          [[3,1,2] , [3,2,4,1,2,3]],
                          fluid.CPUPlace())

#Check lod-tensor nested layers
print (len(a.recursive_sequence_lengths()))
# output:2

#Check the number of the most fundamental elements
print (sum(a.recursive_sequence_lengths()[-1]))
# output:15 (3+2+4+1+2+3=15)
"""

TO_TENSOR = """
import paddle.fluid as fluid
import numpy as np

# create LoD-Tensor
a = fluid.create_lod_tensor(np.array([[1.1], [2.2],[3.3],[4.4]]).astype('float32'), [[1,3]], fluid.CPUPlace())

def LodTensor_to_Tensor(lod_tensor):
  # get lod information of LoD-Tensor
  lod = lod_tensor.lod()
  # transform into array
  array = np.array(lod_tensor)
  new_array = []
  # transform to Tensor according to the layer information of the original LoD-Tensor
  for i in range(len(lod[0]) - 1):
      new_array.append(array[lod[0][i]:lod[0][i + 1]])
  return new_array

new_array = LodTensor_to_Tensor(a)

# output the result
print(new_array)
"""

FROM_TENSOR = """
import paddle.fluid as fluid
import numpy as np

def to_lodtensor(data, place):
  # save the length of Tensor as LoD information
  seq_lens = [len(seq) for seq in data]
  cur_len = 0
  lod = [cur_len]
  for l in seq_lens:
      cur_len += l
      lod.append(cur_len)
  # decrease the dimention of transformed Tensor
  flattened_data = np.concatenate(data, axis=0).astype("int64")
  flattened_data = flattened_data.reshape([len(flattened_data), 1])
  # add lod information to Tensor data
  res = fluid.LoDTensor()
  res.set(flattened_data, place)
  res.set_lod([lod])
  return res

# new_array is the transformed Tensor above
lod_tensor = to_lodtensor(new_array,fluid.CPUPlace())

# output LoD information
print("The LoD of the result: {}.".format(lod_tensor.lod()))

# examine the consistency with Tensor data
print("The array : {}.".format(np.array(lod_tensor)))
"""

# The guide's complete sequence_expand program, with the static graph
# (layers.data, Executor, feed/fetch) replaced by the eager call.
SEQUENCE_EXPAND = """
#Load
import paddle
import paddle.fluid as fluid
import numpy as np

#Define place for computation
place = fluid.CPUPlace()

#Create LoDTensor
x_d = fluid.create_lod_tensor(np.array([[1.1], [2.2],[3.3],[4.4]]).astype('float32'), [[1,3]], place)
y_d = fluid.create_lod_tensor(np.array([[1.1],[1.1],[1.1],[1.1],[1.1],[1.1]]).astype('float32'), [[1,3], [1,2,1,2]], place)

#Start computing (eager: out = fluid.layers.sequence_expand(x=x, y=y, ref_level=0))
results = [fluid.sequence_expand(x=x_d, y=y_d, ref_level=0)]

#Output result
print("The data of the result: {}.".format(np.array(results[0])))

#print the length of sequence of result
print("The recursive sequence lengths of the result: {}.".format(results[0].recursive_sequence_lengths()))

#print the LoD of result
print("The LoD of the result: {}.".format(results[0].lod()))
"""


def test_create_lod_tensor():
    out, ns = run(CREATE)
    assert out.split() == ["2", "15"]
    a = ns["a"]
    assert a.lod() == [[0, 3, 4, 6], [0, 3, 5, 9, 10, 12, 15]]
    assert a.shape() == [15, 1]


def test_lod_tensor_to_tensor_and_back():
    out, ns = run(TO_TENSOR)
    new_array = ns["new_array"]
    assert [x.tolist() for x in new_array] == [
        [[np.float32(1.1)]],
        [[np.float32(2.2)], [np.float32(3.3)], [np.float32(4.4)]],
    ]
    assert "array([[1.1]], dtype=float32)" in out
    # "Transform Tensor to LoD-Tensor" uses new_array from the sample before.
    source = FROM_TENSOR.replace("import paddle.fluid as fluid", "import lodt").replace("fluid.", "lodt.")
    buf = io.StringIO()
    namespace = {"new_array": new_array}
    with contextlib.redirect_stdout(buf):
        exec(source, namespace)
    printed = buf.getvalue()
    assert "The LoD of the result: [[0, 1, 4]]." in printed
    assert np.array(namespace["lod_tensor"]).tolist() == [[1], [2], [3], [4]]


def test_sequence_expand_program():
    out, ns = run(SEQUENCE_EXPAND)
    result = ns["results"][0]
    expected = np.array([[1.1], [2.2], [3.3], [4.4], [2.2], [3.3], [4.4], [2.2], [3.3], [4.4]], dtype=np.float32)
    np.testing.assert_array_equal(np.array(result), expected)
    assert result.recursive_sequence_lengths() == [[1, 3, 3, 3]]
    assert result.lod() == [[0, 1, 4, 7, 10]]
    assert "The recursive sequence lengths of the result: [[1, 3, 3, 3]]." in out


def test_sequence_expand_guide_y_of_the_prepare_data_section():
    # "Prepare Data" gives y_d lengths [[1,3], [2,1,2,1]]: same reference level 0.
    x_d = lodt.create_lod_tensor(np.array([[1.1], [2.2], [3.3], [4.4]]).astype("float32"), [[1, 3]], lodt.CPUPlace())
    y_d = lodt.create_lod_tensor(np.ones((6, 1), "float32"), [[1, 3], [2, 1, 2, 1]], lodt.CPUPlace())
    out = lodt.sequence_expand(x_d, y_d, ref_level=0)
    assert out.recursive_sequence_lengths() == [[1, 3, 3, 3]]
    # The default ref_level -1 uses y's last level.
    x = lodt.LodTensor(np.array([[1], [2], [3], [4]], "int32"))
    assert np.asarray(lodt.sequence_expand(x, y_d)).ravel().tolist() == [1, 1, 2, 3, 3, 4]


def test_paddle_lodtensor_methods():
    t = lodt.LoDTensor()
    assert t.shape() == [] and t.lod() == [] and t.has_valid_recursive_sequence_lengths()
    t.set(np.ndarray([5, 30]), lodt.CPUPlace())
    t.set_recursive_sequence_lengths([[2, 3]])
    assert t.has_valid_recursive_sequence_lengths()
    assert t.lod() == [[0, 2, 5]] and t.shape() == [5, 30]
    # As in Paddle, lengths are checked against the rows only on demand.
    t.set_recursive_sequence_lengths([[2, 2]])
    assert not t.has_valid_recursive_sequence_lengths()
    with pytest.raises(ValueError, match="rows against the LoD's last offset: expected \\[4\\], found \\[5\\]"):
        t.validate()
    t.set(np.zeros((4, 30)), None)  # new data that fits
    assert t.has_valid_recursive_sequence_lengths()
    # set_lod checks offsets against the rows at once.
    with pytest.raises(ValueError, match="expected \\[5\\], found \\[4\\]"):
        t.set_lod([[0, 2, 5]])


def test_create_lod_tensor_from_lists():
    # Paddle's list form: a list of sequences, flattened to [N, 1].
    t = lodt.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], lodt.CPUPlace())
    assert t.shape() == [5, 1] and t.dtype == "int64"
    assert t.recursive_sequence_lengths() == [[2, 3]]
    with pytest.raises(ValueError, match="do not match"):
        lodt.create_lod_tensor([[1, 2], [3]], [[3]], None)
    # Deeper nesting gives more levels.
    t2 = lodt.create_lod_tensor([[[1], [2, 3]], [[4]]], [[2, 1], [1, 2, 1]])
    assert t2.lod() == [[0, 2, 3], [0, 1, 3, 4]]
    # From a LodTensor: its data with new lengths.
    t3 = lodt.create_lod_tensor(t, [[1, 4]])
    assert t3.lod() == [[0, 1, 5]] and np.array_equal(np.asarray(t3), np.asarray(t))
    with pytest.raises(TypeError):
        lodt.create_lod_tensor("nope", [[1]])


def test_create_random_int_lodtensor():
    t = lodt.create_random_int_lodtensor([[2, 3]], base_shape=[4], place=lodt.CPUPlace(), low=0, high=9)
    assert t.shape() == [5, 4] and t.dtype == "int64"
    a = np.asarray(t)
    assert a.min() >= 0 and a.max() <= 9
