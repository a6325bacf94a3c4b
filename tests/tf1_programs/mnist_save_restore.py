# ruff: noqa: F821, UP031  (globals given by the test that runs the program; TF1-era formatting)
# Save and restore in the style of the classic TF1 examples: an MLP whose
# weights live in dicts, trained for a while and saved with tf.train.Saver;
# a second session restores it (the variables are not initialized there),
# checks the accuracy is the same, and trains on. Only the import line
# differs from a TensorFlow 1.x program; `mnist`, STEPS and MODEL_PATH are
# given by the test that runs this file.
import ferrograd.compat.v1 as tf

learning_rate = 0.001
batch_size = 100
n_hidden_1, n_hidden_2, n_input, n_classes = 128, 128, 784, 10

tf.set_random_seed(3)
x = tf.placeholder("float", [None, n_input])
y = tf.placeholder("float", [None, n_classes])

weights = {
    "h1": tf.Variable(tf.random_normal([n_input, n_hidden_1], stddev=0.05)),
    "h2": tf.Variable(tf.random_normal([n_hidden_1, n_hidden_2], stddev=0.05)),
    "out": tf.Variable(tf.random_normal([n_hidden_2, n_classes], stddev=0.05)),
}
biases = {
    "b1": tf.Variable(tf.random_normal([n_hidden_1], stddev=0.05)),
    "b2": tf.Variable(tf.random_normal([n_hidden_2], stddev=0.05)),
    "out": tf.Variable(tf.random_normal([n_classes], stddev=0.05)),
}


def multilayer_perceptron(x, weights, biases):
    layer_1 = tf.nn.relu(tf.add(tf.matmul(x, weights["h1"]), biases["b1"]))
    layer_2 = tf.nn.relu(tf.add(tf.matmul(layer_1, weights["h2"]), biases["b2"]))
    return tf.matmul(layer_2, weights["out"]) + biases["out"]


pred = multilayer_perceptron(x, weights, biases)
cost = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=pred, labels=y))
optimizer = tf.train.AdamOptimizer(learning_rate=learning_rate).minimize(cost)
correct_prediction = tf.equal(tf.argmax(pred, 1), tf.argmax(y, 1))
accuracy = tf.reduce_mean(tf.cast(correct_prediction, "float"))
init = tf.global_variables_initializer()
saver = tf.train.Saver()

print("Starting 1st session...")
with tf.Session() as sess:
    sess.run(init)
    for _step in range(STEPS):
        batch_x, batch_y = mnist.train.next_batch(batch_size)
        _, c = sess.run([optimizer, cost], feed_dict={x: batch_x, y: batch_y})
    first_accuracy = accuracy.eval({x: mnist.test.images, y: mnist.test.labels})
    print("Accuracy:", first_accuracy)
    save_path = saver.save(sess, MODEL_PATH)
    print("Model saved in file: %s" % save_path)

print("Starting 2nd session...")
with tf.Session() as sess:
    load_path = saver.restore(sess, MODEL_PATH)
    print("Model restored from file: %s" % MODEL_PATH)
    restored_accuracy = accuracy.eval({x: mnist.test.images, y: mnist.test.labels})
    for _step in range(STEPS):
        batch_x, batch_y = mnist.train.next_batch(batch_size)
        sess.run(optimizer, feed_dict={x: batch_x, y: batch_y})
    final_accuracy = accuracy.eval({x: mnist.test.images, y: mnist.test.labels})
    print("Accuracy:", final_accuracy)
