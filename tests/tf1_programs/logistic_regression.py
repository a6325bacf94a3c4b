# ruff: noqa: F821, UP031, UP032, B007, B905  (globals given by the test that runs the program; TF1-era style)
# Logistic (softmax) regression in the style of the classic TF1 examples:
# zero-initialised W and b, the cross-entropy written out with tf.log and
# reduction_indices, gradient descent over epochs of next_batch batches with
# the average cost printed, then the test accuracy through Tensor.eval. Only
# the import line differs from a TensorFlow 1.x program; `mnist` and EPOCHS
# are given by the test that runs this file (the classic example ran 25).
import ferrograd.compat.v1 as tf

learning_rate = 0.1
training_epochs = EPOCHS
batch_size = 100
display_step = 1

x = tf.placeholder(tf.float32, [None, 784])
y = tf.placeholder(tf.float32, [None, 10])

W = tf.Variable(tf.zeros([784, 10]))
b = tf.Variable(tf.zeros([10]))

pred = tf.nn.softmax(tf.matmul(x, W) + b)
cost = tf.reduce_mean(-tf.reduce_sum(y * tf.log(pred), reduction_indices=1))
optimizer = tf.train.GradientDescentOptimizer(learning_rate).minimize(cost)
init = tf.global_variables_initializer()

with tf.Session() as sess:
    sess.run(init)
    for epoch in range(training_epochs):
        avg_cost = 0.0
        total_batch = int(mnist.train.num_examples / batch_size)
        for i in range(total_batch):
            batch_xs, batch_ys = mnist.train.next_batch(batch_size)
            _, c = sess.run([optimizer, cost], feed_dict={x: batch_xs, y: batch_ys})
            avg_cost += c / total_batch
        if (epoch + 1) % display_step == 0:
            print("Epoch:", "%04d" % (epoch + 1), "cost=", "{:.9f}".format(avg_cost))
    print("Optimization Finished!")

    correct_prediction = tf.equal(tf.argmax(pred, 1), tf.argmax(y, 1))
    accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
    accuracy_value = accuracy.eval({x: mnist.test.images, y: mnist.test.labels})
    print("Accuracy:", accuracy_value)
