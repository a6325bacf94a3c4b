# ruff: noqa: F821, UP031  (globals given by the test that runs the program; TF1-era style)
# Nearest neighbour in the style of the classic TF1 examples: the L1
# distance from one test image (a placeholder of shape [784]) to every
# training image (a placeholder of shape [None, 784]) written with tf.add
# and tf.negative, reduce_sum over reduction_indices, and the old tf.arg_min;
# one session run per test image, the accuracy counted in Python. Only the
# import line differs from a TensorFlow 1.x program; `mnist` and TESTS are
# given by the test that runs this file (the classic example took 5000
# training and 200 test images).
import ferrograd.compat.v1 as tf
import numpy as np

Xtr, Ytr = mnist.train.next_batch(1000)
Xte, Yte = mnist.test.next_batch(TESTS)

xtr = tf.placeholder("float", [None, 784])
xte = tf.placeholder("float", [784])

distance = tf.reduce_sum(tf.abs(tf.add(xtr, tf.negative(xte))), reduction_indices=1)
pred = tf.arg_min(distance, 0)

accuracy = 0.0
init = tf.global_variables_initializer()
with tf.Session() as sess:
    sess.run(init)
    for i in range(len(Xte)):
        nn_index = sess.run(pred, feed_dict={xtr: Xtr, xte: Xte[i, :]})
        if i % 25 == 0:
            print("Test", i, "Prediction:", np.argmax(Ytr[nn_index]), "True Class:", np.argmax(Yte[i]))
        if np.argmax(Ytr[nn_index]) == np.argmax(Yte[i]):
            accuracy += 1.0 / len(Xte)
    print("Done!")
    print("Accuracy:", accuracy)
